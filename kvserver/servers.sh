# Sourced by loadtest.sh and versus-redis.sh: stops the server they started last ($PID),
# and on exit stops it and removes their work directory ($WORK).
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
cleanup() { stop_server; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
