# Sourced by loadtest.sh, versus-redis.sh and redis-suite.sh: waits for a server to answer,
# stops the server they started last ($PID), and on exit stops it and removes their work
# directory ($WORK).
PID=""
stop_server() {
    if [ -n "$PID" ]; then
        kill "$PID" 2>/dev/null || true
        # graceful shutdown is bounded by the server's --shutdown-timeout; don't wait forever
        for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
        PID=""
    fi
}
# Waits until the server on port $1 answers PING (10 s at most); fails if it does not.
wait_ready() {
    for _ in $(seq 100); do
        if [ "$(timeout 2 redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; then return 0; fi
        sleep 0.1
    done
    echo "server on port $1 did not come up" >&2
    return 1
}
cleanup() { stop_server; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
