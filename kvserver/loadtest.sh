#!/usr/bin/env bash
# Load test of the kvserver example under each --lock, side by side with a real redis-server
# (same durability settings) when one is installed. Prints Markdown tables (and writes them to
# $OUT if set). Every figure is the median of $REPS runs; the targets run interleaved.
#
#   kvserver/loadtest.sh                 # full run (about 6 minutes on 2 cores)
#   QUICK=1 kvserver/loadtest.sh         # smaller, one repetition
#
# Sections:
#   1. redis-benchmark SET and GET, random keys, -P 16 -c 50, appendfsync everysec;
#   2. the same under appendfsync always (redis-server --appendfsync always beside it);
#   3. the lock-sensitive scenario: src/bin/ycsb.rs --workloads long (long readers, SCAN,
#      KEYS, large MGET, and SAVE beside a SET/GET stream), per command class; then the same
#      under a memory limit (--maxmemory $MAXMEMORY, allkeys-lru, on kvserver and
#      redis-server alike), so that writes evict as they go;
#   4. redis-benchmark's default tests: which ones this server supports (one short run);
#   5. with YCSB=1: YCSB-like workloads A, B, C;
#   6. pipelines of $N_PIPE commands per client (one client): redis-benchmark -P 1000, and a
#      client that sends the whole pipeline before it reads a reply (ycsb --workloads
#      sendall, as redis-py's pipeline.execute() does), under the first lock and redis-server.
#
# Needs redis-benchmark and redis-cli (Debian: apt-get install -y redis-tools; redis-server
# for the reference rows). Everything listens on 127.0.0.1 only; every server started here is
# stopped on exit; every command runs under `timeout`.
#
# Knobs (environment): N (requests per redis-benchmark test), N_ALWAYS (the same under
# always), REPS, RANDKEYS (-r), LOCKS, SECS (seconds per scenario run), LONG_READERS,
# SHARDS (empty: the server's default), THREADS, YCSB, YCSB_OPS, YCSB_RECORDS, N_PIPE
# (commands per client in section 6; 1000000 in both modes), MAXMEMORY (section 3's limit;
# 8mb: about a third of the 100000 keys fit).
set -euo pipefail

cd "$(dirname "$0")/.."

QUICK=${QUICK:-}
N=${N:-$([ -n "$QUICK" ] && echo 200000 || echo 1000000)}
N_ALWAYS=${N_ALWAYS:-$([ -n "$QUICK" ] && echo 100000 || echo 300000)}
REPS=${REPS:-$([ -n "$QUICK" ] && echo 1 || echo 3)}
RANDKEYS=${RANDKEYS:-100000}
LOCKS=${LOCKS:-"rwsem tokio async-lock"}
SECS=${SECS:-$([ -n "$QUICK" ] && echo 4 || echo 10)}
LONG_READERS=${LONG_READERS:-4}
SHARDS=${SHARDS:-}
THREADS=${THREADS:-}
YCSB=${YCSB:-}
YCSB_OPS=${YCSB_OPS:-$([ -n "$QUICK" ] && echo 50000 || echo 200000)}
YCSB_RECORDS=${YCSB_RECORDS:-100000}
N_PIPE=${N_PIPE:-1000000}
OUT=${OUT:-}
MAXMEMORY=${MAXMEMORY:-8mb}

for tool in redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || {
        echo "$tool not found (Debian: apt-get install -y redis-tools)" >&2
        exit 1
    }
done
HAVE_REDIS=$(command -v redis-server >/dev/null && echo 1 || echo "")
[ -n "$HAVE_REDIS" ] || echo "redis-server not found: no reference rows (apt-get install -y redis-server)" >&2

echo "building (release)..." >&2
timeout 900 cargo build --release --quiet -p kvserver --bins
# Absolute: redis-server resolves its --logfile after moving into its --dir.
TARGET_DIR=$(cd "${CARGO_TARGET_DIR:-target}" && pwd)
KV=$TARGET_DIR/release/kvserver
YCSB_BIN=$TARGET_DIR/release/ycsb

# Data on the same disk as the build (not a tmpfs), so that fsync costs what it costs.
WORK=$(mktemp -d "$TARGET_DIR/kvserver-loadtest.XXXXXX")
# shellcheck source=kvserver/servers.sh
. kvserver/servers.sh

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
    local p
    for p in $(seq 16500 16600); do
        if port_free "$p"; then echo "$p"; return; fi
    done
    echo "no free port in 16500-16600" >&2
    exit 1
}

# start TARGET(lock|redis) FSYNC [MAXMEMORY] -> sets PORT, PID (with MAXMEMORY: that limit,
# allkeys-lru)
start() {
    PORT=$(pick_port)
    local dir="$WORK/data-$1-$RANDOM"
    local limit=()
    [ -n "${3:-}" ] && limit=(--maxmemory "$3" --maxmemory-policy allkeys-lru)
    mkdir -p "$dir"
    if [ "$1" = redis ]; then
        redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly yes \
            --appendfsync "$2" --dir "$dir" --daemonize no --logfile "$WORK/redis.log" "${limit[@]}" &
    else
        local args=(--port "$PORT" --lock "$1" --dir "$dir" --appendfsync "$2" --quiet "${limit[@]}")
        [ -n "$SHARDS" ] && args+=(--shards "$SHARDS")
        [ -n "$THREADS" ] && args+=(--threads "$THREADS")
        "$KV" "${args[@]}" 2>>"$WORK/server.log" &
    fi
    PID=$!
    wait_ready "$PORT"
}

# bench PORT N -> prints "SET_RPS GET_RPS"
bench() {
    timeout 300 redis-benchmark -h 127.0.0.1 -p "$1" -t set,get -P 16 -c 50 -n "$2" -r "$RANDKEYS" --csv 2>/dev/null |
        awk -F, '{gsub(/"/, "")} $1=="SET"{s=$2} $1=="GET"{g=$2} END{printf "%.0f %.0f\n", s, g}'
}

median() { tr ' ' '\n' | awk 'NF' | sort -n | awk '{a[NR]=$1} END{if (NR==0) print "-"; else print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b; else print "-" }'; }
name_of() { if [ "$1" = redis ]; then echo redis-server; else echo "kvserver --lock $1"; fi; }

TARGETS="$LOCKS"
[ -n "$HAVE_REDIS" ] && TARGETS="$TARGETS redis"

# ---- 1 and 2: redis-benchmark under everysec and always ------------------------------------
declare -A SET GET
echo "redis-benchmark -t set,get -P 16 -c 50 -r $RANDKEYS, $REPS rep(s), targets interleaved" >&2
for rep in $(seq "$REPS"); do
    for mode in everysec always; do
        n=$N
        [ "$mode" = always ] && n=$N_ALWAYS
        for t in $TARGETS; do
            start "$t" "$mode"
            r=$(bench "$PORT" "$n")
            stop_server
            SET[$mode,$t]="${SET[$mode,$t]:-} ${r% *}"
            GET[$mode,$t]="${GET[$mode,$t]:-} ${r#* }"
            echo "  rep $rep $mode $t: SET ${r% *} GET ${r#* }" >&2
        done
    done
done

# ---- 3: the lock-sensitive scenario, then under a memory limit ------------------------------
declare -A LONG
CLASSES="SET GET SCAN KEYS MGET SAVE"
echo "ycsb --workloads long --secs $SECS --long-readers $LONG_READERS, $REPS rep(s); again under --maxmemory $MAXMEMORY" >&2
for rep in $(seq "$REPS"); do
    for limit in "" "$MAXMEMORY"; do
        for t in $TARGETS; do
            # The limit's rows are keyed "mm:TARGET".
            key=$t
            [ -n "$limit" ] && key="mm:$t"
            start "$t" everysec "$limit"
            while IFS= read -r line; do
                c=$(echo "$line" | sed -n 's/.*"class":"\([A-Z]*\)".*/\1/p')
                [ -n "$c" ] || continue
                for f in ops_per_sec p50_us p99_us max_us errors; do
                    v=$(echo "$line" | sed -n "s/.*\"$f\":\([0-9.]*\).*/\1/p")
                    LONG[$key,$c,$f]="${LONG[$key,$c,$f]:-} $(printf '%.0f' "${v:-0}")"
                done
            done < <(timeout 300 "$YCSB_BIN" --port "$PORT" --load --records 100000 --workloads long \
                --secs "$SECS" --long-readers "$LONG_READERS" --json 2>>"$WORK/ycsb.log")
            if [ -n "$limit" ]; then
                ev=$(redis-cli -p "$PORT" info stats | tr -d '\r' | sed -n 's/^evicted_keys://p')
                LONG[$key,evicted]="${LONG[$key,evicted]:-} ${ev:-0}"
            fi
            stop_server
            echo "  rep $rep long${limit:+ (maxmemory $limit)} $t: SET p99 $(echo "${LONG[$key,SET,p99_us]:-}" | awk '{print $NF}')us, SCAN $(echo "${LONG[$key,SCAN,ops_per_sec]:-}" | awk '{print $NF}')/s" >&2
        done
    done
done

# ---- 4: redis-benchmark's default tests ----------------------------------------------------
first_lock=${LOCKS%% *}
start "$first_lock" everysec
# redis-benchmark stops at the first error reply, so the tests run one by one.
declare -A DEFAULT_RES
DEFAULT_TESTS="ping_inline ping_mbulk set get incr mset lpush rpush lpop rpop sadd hset spop zadd zpopmin lrange_100"
for t in $DEFAULT_TESTS; do
    r=$(timeout 120 redis-benchmark -h 127.0.0.1 -p "$PORT" -n 20000 -c 50 -t "$t" --csv 2>&1 || true)
    err=$(echo "$r" | grep -m1 "Error from server" || true)
    if [ -n "$err" ]; then
        DEFAULT_RES[$t]="error: ${err#Error from server: }"
    else
        DEFAULT_RES[$t]=$(echo "$r" | awk -F, '{gsub(/"/, "")} NR>1 && $2+0>0 {printf "%.0f", $2; exit}')
    fi
done
stop_server

# ---- 5: YCSB A, B, C (optional) ------------------------------------------------------------
declare -A YCSB_RES
if [ -n "$YCSB" ]; then
    for t in $TARGETS; do
        start "$t" everysec
        while IFS= read -r line; do
            w=$(echo "$line" | sed -n 's/.*"workload":"\([a-z]*\)".*/\1/p')
            ops=$(echo "$line" | sed -n 's/.*"ops_per_sec":\([0-9.]*\).*/\1/p')
            p99=$(echo "$line" | sed -n 's/.*"p99_us":\([0-9]*\).*/\1/p')
            [ -n "$w" ] && YCSB_RES[$w,$t]="$(printf '%.0f' "$ops") (p99 ${p99}us)"
        done < <(timeout 600 "$YCSB_BIN" --port "$PORT" --load --records "$YCSB_RECORDS" --ops "$YCSB_OPS" \
            --workloads a,b,c --clients 32 --max-secs 120 --json 2>>"$WORK/ycsb.log")
        stop_server
    done
fi

# ---- 6: pipelines of N_PIPE commands per client --------------------------------------------
declare -A PIPE
PIPE_TARGETS="$first_lock"
[ -n "$HAVE_REDIS" ] && PIPE_TARGETS="$PIPE_TARGETS redis"
echo "pipelines of $N_PIPE commands per client: redis-benchmark -P 1000 -c 1, ycsb sendall, $REPS rep(s)" >&2
for rep in $(seq "$REPS"); do
    for t in $PIPE_TARGETS; do
        start "$t" everysec
        r=$(timeout 300 redis-benchmark -h 127.0.0.1 -p "$PORT" -t set,get -P 1000 -c 1 -n "$N_PIPE" -r "$RANDKEYS" --csv 2>/dev/null |
            awk -F, '{gsub(/"/, "")} $1=="SET"{s=$2} $1=="GET"{g=$2} END{printf "%.0f %.0f\n", s, g}')
        PIPE[$t,pset]="${PIPE[$t,pset]:-} ${r% *}"
        PIPE[$t,pget]="${PIPE[$t,pget]:-} ${r#* }"
        while IFS= read -r line; do
            c=$(echo "$line" | sed -n 's/.*"class":"\([A-Z]*\)".*/\1/p')
            v=$(echo "$line" | sed -n 's/.*"ops_per_sec":\([0-9.]*\).*/\1/p')
            [ -n "$c" ] && [ -n "$v" ] && PIPE[$t,w$c]="${PIPE[$t,w$c]:-} $(printf '%.0f' "$v")"
        done < <(timeout 300 "$YCSB_BIN" --port "$PORT" --workloads sendall --clients 1 --sendall-ops "$N_PIPE" \
            --records "$RANDKEYS" --value-size 3 --max-secs 240 --json 2>>"$WORK/ycsb.log" || true)
        stop_server
        echo "  rep $rep pipelined $t: -P 1000 SET ${r% *} GET ${r#* }; sent whole SET $(echo "${PIPE[$t,wSET]:-}" | awk '{print $NF}') GET $(echo "${PIPE[$t,wGET]:-}" | awk '{print $NF}')" >&2
    done
done

# ---- report --------------------------------------------------------------------------------
{
    echo "Machine: $(nproc) cores, $(uname -sr); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); medians of $REPS."
    echo
    for mode in everysec always; do
        n=$N
        [ "$mode" = always ] && n=$N_ALWAYS
        echo "#### redis-benchmark -t set,get -P 16 -c 50 -n $n -r $RANDKEYS, appendfsync $mode (requests/s)"
        echo
        echo "| server | SET | GET | SET vs redis | GET vs redis |"
        echo "|---|---:|---:|---:|---:|"
        rs=$(echo "${SET[$mode,redis]:-}" | median)
        rg=$(echo "${GET[$mode,redis]:-}" | median)
        for t in $TARGETS; do
            s=$(echo "${SET[$mode,$t]:-}" | median)
            g=$(echo "${GET[$mode,$t]:-}" | median)
            echo "| $(name_of "$t") | $s | $g | $(ratio "$s" "$rs") | $(ratio "$g" "$rg") |"
        done
        echo
    done
    echo "#### Lock-sensitive scenario: ycsb --workloads long --secs $SECS (32 GET/SET clients, $LONG_READERS long readers, SAVE every 200 ms; 100000 keys)"
    echo
    echo "Per command class: ops/s, p50 / p99 / max latency in ms."
    echo
    echo "| server | class | ops/s | p50 ms | p99 ms | max ms |"
    echo "|---|---|---:|---:|---:|---:|"
    for t in $TARGETS; do
        for c in $CLASSES; do
            [ -n "${LONG[$t,$c,ops_per_sec]:-}" ] || continue
            ops=$(echo "${LONG[$t,$c,ops_per_sec]}" | median)
            ms() { echo "$1" | median | awk '{ if ($1 == "-") print "-"; else printf "%.1f", $1 / 1000 }'; }
            echo "| $(name_of "$t") | $c | $ops | $(ms "${LONG[$t,$c,p50_us]}") | $(ms "${LONG[$t,$c,p99_us]}") | $(ms "${LONG[$t,$c,max_us]}") |"
        done
    done
    echo
    echo "#### Lock-sensitive scenario under a memory limit: the same, --maxmemory $MAXMEMORY --maxmemory-policy allkeys-lru"
    echo
    echo "Per command class: ops/s, p50 / p99 / max latency in ms, errors (OOM would show there); keys evicted in the run."
    echo
    echo "| server | class | ops/s | p50 ms | p99 ms | max ms | errors | evicted |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for t in $TARGETS; do
        for c in $CLASSES; do
            [ -n "${LONG[mm:$t,$c,ops_per_sec]:-}" ] || continue
            ops=$(echo "${LONG[mm:$t,$c,ops_per_sec]}" | median)
            ms() { echo "$1" | median | awk '{ if ($1 == "-") print "-"; else printf "%.1f", $1 / 1000 }'; }
            echo "| maxmemory: $(name_of "$t") | $c | $ops | $(ms "${LONG[mm:$t,$c,p50_us]}") | $(ms "${LONG[mm:$t,$c,p99_us]}") | $(ms "${LONG[mm:$t,$c,max_us]}") | $(echo "${LONG[mm:$t,$c,errors]:-}" | median) | $(echo "${LONG[mm:$t,evicted]:-}" | median) |"
        done
    done
    echo
    echo "#### redis-benchmark's default tests against kvserver --lock $first_lock (-n 20000 -c 50, no pipelining, one run each)"
    echo
    echo "| test | requests/s, or the reply |"
    echo "|---|---|"
    for t in $DEFAULT_TESTS; do
        echo "| $t | ${DEFAULT_RES[$t]:-} |"
    done
    echo
    echo "#### Pipelines of $N_PIPE commands per client, one client, appendfsync everysec (requests/s)"
    echo
    echo "-P 1000: redis-benchmark -t set,get -P 1000 -c 1 -n $N_PIPE -r $RANDKEYS; sent whole: ycsb --workloads sendall --clients 1 --sendall-ops $N_PIPE (every command written before the first reply is read)."
    echo
    echo "| server | SET -P 1000 | GET -P 1000 | SET sent whole | GET sent whole | sent whole SET vs redis | sent whole GET vs redis |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    rws=$(echo "${PIPE[redis,wSET]:-}" | median)
    rwg=$(echo "${PIPE[redis,wGET]:-}" | median)
    for t in $PIPE_TARGETS; do
        ws=$(echo "${PIPE[$t,wSET]:-}" | median)
        wg=$(echo "${PIPE[$t,wGET]:-}" | median)
        echo "| pipelined: $(name_of "$t") | $(echo "${PIPE[$t,pset]:-}" | median) | $(echo "${PIPE[$t,pget]:-}" | median) | $ws | $wg | $(ratio "$ws" "$rws") | $(ratio "$wg" "$rwg") |"
    done
    if [ -n "$YCSB" ]; then
        echo
        echo "#### YCSB-like: $YCSB_RECORDS records, $YCSB_OPS ops, 32 clients, zipfian 0.99 (ops/s, one run)"
        echo
        echo "| server | A (50/50) | B (95/5) | C (read only) |"
        echo "|---|---:|---:|---:|"
        for t in $TARGETS; do
            echo "| $(name_of "$t") | ${YCSB_RES[a,$t]:-} | ${YCSB_RES[b,$t]:-} | ${YCSB_RES[c,$t]:-} |"
        done
    fi
} | tee ${OUT:+"$OUT"}
