#!/usr/bin/env bash
# Redis' own Tcl test suite against a fresh kvserver, in external-server mode, over the units
# issue 30 measures; prints each unit's passed and failed tests and the totals.
#
#   REDIS_SRC=path/to/redis kvserver/redis-suite.sh     # a checkout of github.com/redis/redis
#
# The suite runs with --singledb (the server has one database), --durable (a failed test does
# not end its unit), and without the tests tagged needs:debug (DEBUG), needs:repl
# (replication) and needs:config-maxmemory (CONFIG SET maxmemory), which need what this
# server does not have; tests tagged external:skip skip themselves. Needs tclsh.
#
# Knobs (environment): REDIS_SRC (required), BIN (the kvserver binary; built in release mode
# if unset), PORT (16710), UNITS (the list below).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${REDIS_SRC:?set REDIS_SRC to a checkout of the redis repository}"
PORT=${PORT:-16710}
UNITS=${UNITS:-"type/string type/incr keyspace expire info-command protocol scan quit multi introspection other"}
command -v tclsh >/dev/null || { echo "tclsh not found" >&2; exit 1; }
TARGET_DIR=$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet -p kvserver --bin kvserver
    BIN=$TARGET_DIR/release/kvserver
fi
WORK=$(mktemp -d "$TARGET_DIR/redis-suite.XXXXXX")
# shellcheck source=kvserver/servers.sh
. kvserver/servers.sh
"$BIN" --port "$PORT" --dir "$WORK" --quiet 2>>"$WORK/kvserver.log" &
PID=$!
wait_ready "$PORT"
cd "$REDIS_SRC"
total_ok=0
total_err=0
printf '%-14s %6s %6s\n' unit passed failed
for unit in $UNITS; do
    out=$(timeout 900 ./runtest --host 127.0.0.1 --port "$PORT" --singledb --durable \
        --tags -needs:debug --tags -needs:repl --tags -needs:config-maxmemory \
        --single "unit/$unit" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' || true)
    ok=$(grep -c '^\[ok\]' <<<"$out" || true)
    err=$(grep -cE '^\[(err|exception)\]' <<<"$out" || true)
    printf '%-14s %6d %6d\n' "$unit" "$ok" "$err"
    total_ok=$((total_ok + ok))
    total_err=$((total_err + err))
done
printf '%-14s %6d %6d\n' total "$total_ok" "$total_err"
