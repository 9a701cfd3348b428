#!/usr/bin/env bash
# Redis' own Tcl test suite in external-server mode, over the units issue 42 measures, against
# a fresh kvserver and (optionally, in the same run) a fresh redis-server; prints each unit's
# passed, failed ([err]) and broken ([exception]) tests per server, and the totals.
#
#   REDIS_SRC=path/to/redis kvserver/redis-suite.sh                   # kvserver only
#   SERVERS="kvserver redis-server" REDIS_SRC=... kvserver/redis-suite.sh   # both, side by side
#
# Nothing is excluded: the suite runs every test of a unit but those tagged external:skip
# (which need a server the suite starts itself, and skip themselves in this mode). It runs
# with --singledb (kvserver has one database; redis-server runs the same way) and --durable
# (a failed test does not end its unit). Each unit gets a freshly started server, so that one
# unit's leftovers (settings, a stuck client) do not decide the next one's result.
# Needs tclsh and redis-cli; redis-server for SERVERS=redis-server.
#
# Knobs (environment): REDIS_SRC (required), SERVERS (kvserver and/or redis-server),
# BIN (the kvserver binary; built in release mode if unset), REDIS_SERVER (redis-server),
# PORT (16710), UNITS (the list below), LOGS (a folder to keep each unit's output in).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${REDIS_SRC:?set REDIS_SRC to a checkout of the redis repository}"
PORT=${PORT:-16710}
SERVERS=${SERVERS:-kvserver}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
UNITS=${UNITS:-"type/string type/incr keyspace expire info-command protocol scan quit multi introspection other type/list type/hash type/set type/zset pubsub auth info maxmemory"}
command -v tclsh >/dev/null || { echo "tclsh not found" >&2; exit 1; }
TARGET_DIR=$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)
if [[ " $SERVERS " == *" kvserver "* && -z "${BIN:-}" ]]; then
    cargo build --release --quiet -p kvserver --bin kvserver
    BIN=$TARGET_DIR/release/kvserver
fi
WORK=$(mktemp -d "$TARGET_DIR/redis-suite.XXXXXX")
# shellcheck source=kvserver/servers.sh
. kvserver/servers.sh

start() { # $1: kvserver or redis-server; $2: a fresh folder
    mkdir -p "$2"
    case $1 in
        kvserver) "$BIN" --port "$PORT" --dir "$2" --quiet 2>>"$2/server.log" & ;;
        # The suite's own server settings that cannot be set at run time (DEBUG, protected
        # configs, MODULE: tests/assets/default.conf).
        redis-server) "$REDIS_SERVER" --port "$PORT" --bind 127.0.0.1 --dir "$2" --save '' \
            --appendonly no --daemonize no --enable-debug-command yes \
            --enable-protected-configs yes --enable-module-command yes \
            >>"$2/server.log" 2>&1 & ;;
        *) echo "unknown server $1" >&2; exit 1 ;;
    esac
    PID=$!
    wait_ready "$PORT"
}

declare -A OK ERR EXC
for server in $SERVERS; do
    for unit in $UNITS; do
        dir=$WORK/$server/${unit//\//_}
        start "$server" "$dir"
        out=$(cd "$REDIS_SRC" && timeout 900 ./runtest --host 127.0.0.1 --port "$PORT" --singledb --durable \
            --single "unit/$unit" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | tr -d '\000' || true)
        stop_server
        if [ -n "${LOGS:-}" ]; then
            mkdir -p "$LOGS/$server"
            printf '%s\n' "$out" >"$LOGS/$server/${unit//\//_}.txt"
        fi
        OK[$server,$unit]=$(grep -c '^\[ok\]' <<<"$out" || true)
        ERR[$server,$unit]=$(grep -c '^\[err\]' <<<"$out" || true)
        EXC[$server,$unit]=$(grep -c '^\[exception\]' <<<"$out" || true)
    done
done

printf '%-14s' unit
for server in $SERVERS; do printf ' %22s' "$server ok/err/exc"; done
printf '\n'
declare -A T_OK T_ERR T_EXC
for unit in $UNITS total; do
    printf '%-14s' "$unit"
    for server in $SERVERS; do
        if [ "$unit" = total ]; then
            o=${T_OK[$server]:-0} e=${T_ERR[$server]:-0} x=${T_EXC[$server]:-0}
        else
            o=${OK[$server,$unit]} e=${ERR[$server,$unit]} x=${EXC[$server,$unit]}
            T_OK[$server]=$((${T_OK[$server]:-0} + o))
            T_ERR[$server]=$((${T_ERR[$server]:-0} + e))
            T_EXC[$server]=$((${T_EXC[$server]:-0} + x))
        fi
        printf ' %22s' "$o/$e/$x"
    done
    printf '\n'
done
