#!/usr/bin/env bash
# Instructions per uncontended lock+unlock, for this lock and its peers, counted by
# callgrind (stable on a noisy machine): (count at 2N - count at N) / N per op.
# Usage: scripts/instructions.sh [N [cargo options]]   (default N = 200000), e.g.
#   scripts/instructions.sh 200000 --no-default-features
#   scripts/instructions.sh 200000 --features lock_stat
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
shift || true
bin=$(cargo bench --no-run --bench instructions --message-format=json "$@" 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "instructions":
        print(m["executable"])')
count() {
  INSTRUCTIONS_OP=$1 INSTRUCTIONS_N=$2 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$bin" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-22s %s\n' op "instructions per iteration (uncontended: a lock+unlock; queued: see benches/instructions.rs)"
# The uncontended ops, then the queue path (`*-queued-*`: two acquires per iteration that
# queue and are granted; see benches/instructions.rs): OPS="..." for a subset.
ops=${OPS:-"rwsem-read rwsem-write rwsem-try-read tokio-read tokio-write async-lock-read
  async-lock-write parking_lot-read parking_lot-write rwsem-queued-rw rwsem-fifo-queued-rw
  tokio-queued-rw rwsem-queued-ww rwsem-fifo-queued-ww tokio-queued-ww"}
for op in $ops; do
  a=$(count "$op" "$n")
  b=$(count "$op" $((2 * n)))
  python3 -c "print(f'{\"$op\":<22} {($b - $a) / $n:.1f}')"
done
